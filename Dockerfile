# The rubric-bot image used by compose.yaml: `docker run IMAGE serve` (or worker, db upgrade, ...).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md manifest.yml ./
COPY bot ./bot
COPY grading ./grading
RUN pip install --no-cache-dir .
ENTRYPOINT ["rubric-bot"]
