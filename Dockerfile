# SPDX-License-Identifier: GPL-3.0-or-later
#
# Shiftlab application image: used by the `web` (gunicorn), `migrate`,
# `worker` (Celery) and `flower` services in docker-compose.yml.
#
#   docker build -t shiftlab:latest .
#
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=shiftlab.settings_production \
    SHIFTLAB_DATA_DIR=/data \
    HF_HOME=/data/huggingface

WORKDIR /app

# If requirements.txt ever pulls in torch, preinstall a CPU-only build first so
# pip does not download the multi-GB CUDA wheels, e.g.:
#   docker build --build-arg TORCH_SPEC="torch==<version>" .
# (the version must match the pin in requirements.txt). Empty = skip.
ARG TORCH_SPEC=""
ARG TORCH_INDEX_URL="https://download.pytorch.org/whl/cpu"
# hadolint ignore=DL3013
RUN if [ -n "$TORCH_SPEC" ]; then pip install "$TORCH_SPEC" --index-url "$TORCH_INDEX_URL"; fi

# Dependencies first so that code changes do not invalidate this layer.
COPY requirements.txt requirements-nodeps.txt ./
RUN pip install -r requirements.txt && pip install --no-deps -r requirements-nodeps.txt

# Code stays owned by root (read-only for the runtime user); only /data,
# the persistent SHIFTLAB_DATA_DIR volume, is writable by the app.
COPY . .

# STATIC_ROOT is $SHIFTLAB_DATA_DIR/static (see shiftlab/settings.py), i.e.
# inside the /data volume. Collecting here puts the files into the image's
# /data, which Docker copies into the shiftlab-data volume when that volume is
# first created. On later upgrades the volume already exists, so the compose
# `migrate` job runs collectstatic again to refresh it.
# The secret and signing keys are throw-away values that exist only in this RUN
# step and are NOT real secrets; production settings refuse to import without them.
RUN SHIFTLAB_SECRET_KEY=build-only-collectstatic-not-a-secret \
    SHIFTLAB_CONFIG_SIGNING_KEY=build-only-collectstatic-not-a-secret \
    python manage.py collectstatic --noinput

# Non-root runtime user. /data (static files; HF_HOME for the Hugging Face
# cache, since the user's home /app is read-only) is owned by this user so that
# a fresh named volume mounted there inherits the ownership.
RUN groupadd --system --gid 1000 shiftlab \
    && useradd --system --uid 1000 --gid shiftlab --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin shiftlab \
    && mkdir -p /data/huggingface \
    && chown -R shiftlab:shiftlab /data

# Numeric so that runtimes can verify "non-root" without reading /etc/passwd.
USER 1000:1000

EXPOSE 8000

CMD ["gunicorn", "shiftlab.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
