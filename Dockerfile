# The rubric-bot image used by compose.yaml and compose.quickstart.yaml: `docker run IMAGE serve`
# (or worker, db upgrade, ...). Model providers other than OpenAI are extras of the package, chosen
# at build time: docker build --build-arg EXTRAS=anthropic . (several: EXTRAS=anthropic,google).
FROM python:3.11-slim
ARG EXTRAS=""
WORKDIR /app
COPY pyproject.toml README.md manifest.yml ./
COPY bot ./bot
COPY grading ./grading
RUN pip install --no-cache-dir ".${EXTRAS:+[$EXTRAS]}"
# The bot runs as an unprivileged account of its own, not root. /data (owned by it) is where the
# SQLite file lives when one is used: mount a volume there (a new named volume takes this ownership).
RUN useradd --system --uid 10001 --user-group --home-dir /data --create-home rubricbot
USER rubricbot
WORKDIR /data
ENTRYPOINT ["rubric-bot"]
