# syntax=docker/dockerfile:1
# One image for every Cronwell process; compose.yaml picks the command (web, scheduler, worker, migrate).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FLASK_APP=app \
    INSTANCE_DIR=/app/instance \
    GUNICORN_BIND=0.0.0.0:8000

# A fixed, unprivileged user: files in volumes keep one owner across rebuilds.
RUN groupadd --system --gid 10001 cronwell \
 && useradd --system --uid 10001 --gid cronwell --home-dir /app --no-create-home \
            --shell /usr/sbin/nologin cronwell

WORKDIR /app

# Dependencies first: this layer is rebuilt only when the lock changes, not on every code edit. The
# lock pins every package with its hashes, so the image runs the versions the test suite passed with.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock

# The code belongs to root and is read-only for the app; only the instance and data dirs are writable.
COPY . .
RUN mkdir -p /app/instance /data/artifacts /data/markers \
 && chown -R cronwell:cronwell /app/instance /data

USER cronwell:cronwell
EXPOSE 8000 9101 9102
CMD ["gunicorn", "--config", "gunicorn.conf.py", "wsgi:app"]
