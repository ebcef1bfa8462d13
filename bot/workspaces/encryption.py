"""OAuth tokens encrypted at rest with `RUBRIC_BOT_ENCRYPTION_KEY` (`cryptography`'s Fernet).

slack_sdk's SQLAlchemy installation store keeps working as it is: `EncryptedInstallationStore` sits
in front of it, encrypting the bot, user and refresh tokens of what it saves and decrypting what it
finds. The setting holds one key or several, comma-separated: the first encrypts, any of them
decrypts (`MultiFernet`), so a new key goes first and the old one stays until `rubric-bot db
rotate-key` has encrypted every stored token with the new one.

At start (`prepare_stored_tokens`) a process with the key encrypts the tokens still stored in
plain text (those of a deployment that had no key before), and one without it refuses to start if
any stored token is encrypted: it could not use them.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import SecretStr
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from sqlalchemy import Table, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.config import ConfigError
from bot.db.admin import upgrade
from bot.db.database import WRITE_LOCK_OPTION, Database
from bot.db.schema import BOT_TOKENS, INSTALLATION_TOKENS, installations, installed_bots

logger = logging.getLogger(__name__)

ENCRYPTED_PREFIX = "fernet:"
"""What starts a stored token that is encrypted (Slack's tokens start with ``xox``)."""

TOKEN_COLUMNS: dict[Table, tuple[str, ...]] = {installations: INSTALLATION_TOKENS, installed_bots: BOT_TOKENS}
"""Every stored token, by table."""

KEY_SETTING = "RUBRIC_BOT_ENCRYPTION_KEY"

Stored = TypeVar("Stored", Installation, Bot)


class TokenCipher:
    """Encrypts with the first of the keys, decrypts with any of them."""

    def __init__(self, keys: Sequence[SecretStr]) -> None:
        self._fernet = MultiFernet([Fernet(key.get_secret_value()) for key in keys])

    def encrypt(self, value: str | None) -> str | None:
        """`value` encrypted (None stays None, an encrypted value stays as it is)."""
        if value is None or is_encrypted(value):
            return value
        return ENCRYPTED_PREFIX + self._fernet.encrypt(value.encode()).decode()

    def decrypt(self, value: str | None) -> str | None:
        """`value` in plain text; `InvalidToken` if none of the keys encrypted it."""
        if value is None or not is_encrypted(value):
            return value
        return self._fernet.decrypt(value.removeprefix(ENCRYPTED_PREFIX).encode()).decode()

    def rotate(self, value: str | None) -> str | None:
        """`value` encrypted with the first key, whichever key (or none) it was encrypted with."""
        if value is None or not is_encrypted(value):
            return self.encrypt(value)
        return ENCRYPTED_PREFIX + self._fernet.rotate(value.removeprefix(ENCRYPTED_PREFIX).encode()).decode()


def is_encrypted(value: str) -> bool:
    return value.startswith(ENCRYPTED_PREFIX)


def cipher_of(keys: Sequence[SecretStr]) -> TokenCipher | None:
    """The cipher of `RUBRIC_BOT_ENCRYPTION_KEY`'s keys, None when it is not set."""
    return TokenCipher(keys) if keys else None


class EncryptedInstallationStore(AsyncInstallationStore):
    """slack_sdk's SQLAlchemy installation store, its tokens encrypted on the way in and decrypted
    on the way out; everything else is the store's own."""

    def __init__(self, store: AsyncSQLAlchemyInstallationStore, cipher: TokenCipher) -> None:
        self.store = store
        self._cipher = cipher

    @property
    def logger(self) -> logging.Logger:
        return self.store.logger

    async def async_save(self, installation: Installation) -> None:
        await self.store.async_save(_with_tokens(installation, INSTALLATION_TOKENS, self._cipher.encrypt))

    async def async_save_bot(self, bot: Bot) -> None:
        await self.store.async_save_bot(_with_tokens(bot, BOT_TOKENS, self._cipher.encrypt))

    async def async_find_bot(self, **query: Any) -> Bot | None:
        found = await self.store.async_find_bot(**query)
        return None if found is None else _with_tokens(found, BOT_TOKENS, self._cipher.decrypt)

    async def async_find_installation(self, **query: Any) -> Installation | None:
        found = await self.store.async_find_installation(**query)
        return None if found is None else _with_tokens(found, INSTALLATION_TOKENS, self._cipher.decrypt)

    async def async_delete_bot(self, **query: Any) -> None:
        await self.store.async_delete_bot(**query)

    async def async_delete_installation(self, **query: Any) -> None:
        await self.store.async_delete_installation(**query)

    async def async_delete_all(self, **query: Any) -> None:
        await self.store.async_delete_all(**query)


def _with_tokens(stored: Stored, fields: Sequence[str], change: Callable[[str | None], str | None]) -> Stored:
    """A copy of `stored` with `change` applied to its token `fields` (the original is the caller's)."""
    changed = copy.copy(stored)
    for name in fields:
        setattr(changed, name, change(getattr(stored, name)))
    return changed


@dataclass(frozen=True)
class Resealed:
    """What `reseal` changed."""

    tokens: int
    rows: int


async def prepare_stored_tokens(engine: AsyncEngine, cipher: TokenCipher | None) -> None:
    """Make the stored tokens usable by this process: with a key, encrypt those still in plain
    text; a `ConfigError` saying what to do if some are encrypted and there is no key, or a key
    that decrypts none of them."""
    async with engine.begin() as connection:
        if cipher is None:
            if await _any_encrypted(connection):
                raise ConfigError(
                    [
                        f"{KEY_SETTING} is not set, but the stored OAuth tokens are encrypted: set it to "
                        "the key they were encrypted with (README: Tokens encrypted at rest)"
                    ]
                )
            return
        resealed = await _reseal(connection, cipher, cipher.encrypt)
    if resealed.tokens:
        logger.info(
            "encrypted %d stored token(s) of %d installation record(s) with %s",
            resealed.tokens,
            resealed.rows,
            KEY_SETTING,
        )


async def rotate_stored_tokens(database: Database, cipher: TokenCipher) -> Resealed:
    """Encrypt every token stored in `database` with the first key, in one transaction
    (`rubric-bot db rotate-key`); its schema is brought up to date first."""
    await upgrade(database)
    engine = database.create_engine().execution_options(**{WRITE_LOCK_OPTION: True})
    try:
        async with engine.begin() as connection:
            return await _reseal(connection, cipher, cipher.rotate)
    finally:
        await engine.dispose()


async def _any_encrypted(connection: AsyncConnection) -> bool:
    for table, columns in TOKEN_COLUMNS.items():
        encrypted = [table.c[name].startswith(ENCRYPTED_PREFIX, autoescape=True) for name in columns]
        query = select(table.c.id).where(or_(*encrypted)).limit(1)
        if (await connection.execute(query)).first() is not None:
            return True
    return False


async def _reseal(
    connection: AsyncConnection, cipher: TokenCipher, change: Callable[[str | None], str | None]
) -> Resealed:
    """Apply `change` to every stored token, writing the rows it changed; a `ConfigError` if the
    keys decrypt none of an encrypted token."""
    tokens = rows = 0
    for table, columns in TOKEN_COLUMNS.items():
        query = select(table.c.id, *(table.c[name] for name in columns)).with_for_update()
        for row in (await connection.execute(query)).all():
            stored = dict(zip(columns, row[1:], strict=True))
            _check_readable(cipher, stored.values())
            changed = {
                name: new for name, value in stored.items() if value and (new := change(value)) != value
            }
            if changed:
                await connection.execute(update(table).where(table.c.id == row.id).values(**changed))
                tokens, rows = tokens + len(changed), rows + 1
    return Resealed(tokens, rows)


def _check_readable(cipher: TokenCipher, values: Iterable[str | None]) -> None:
    """A `ConfigError` if one of `values` is encrypted with none of the keys."""
    try:
        for value in values:
            cipher.decrypt(value)
    except InvalidToken:
        raise ConfigError(
            [
                f"{KEY_SETTING} cannot decrypt the stored OAuth tokens: put the key they were encrypted "
                "with in it (after the new one, comma-separated, while rotating keys)"
            ]
        ) from None
