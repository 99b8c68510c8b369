# liqo-dash container image: one image for every process (web, worker, beat, watcher); the
# Kubernetes manifests in deploy/ pick the command. Build: docker build -t liqo-dash .

# --- build stage: a virtualenv with the pinned runtime dependencies (wheels only, no compiler)
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
COPY requirements.txt /tmp/requirements.txt
RUN /opt/venv/bin/pip install --only-binary=:all: -r /tmp/requirements.txt

# --- runtime stage
FROM python:3.11-slim-bookworm
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=liqo_dash.settings \
    LIQO_DASH_VAR_DIR=/tmp/var \
    PORT=8000
# git: the GitOps hand-off commits and pushes with Debian's git (offloading/gitops/repo.py).
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 liqodash \
    && useradd --system --uid 10001 --gid liqodash --home-dir /app --shell /usr/sbin/nologin liqodash
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY manage.py ./
COPY liqo_dash ./liqo_dash
COPY liqo_rules ./liqo_rules
COPY offloading ./offloading
COPY access ./access
COPY templates ./templates
COPY static ./static
COPY deploy/gunicorn.conf.py ./deploy/gunicorn.conf.py
# Static files are collected at build time (whitenoise serves them); the key below exists only for
# this step and is not in the final environment.
RUN SECRET_KEY=collectstatic-only-build-key-collectstatic-only-build-key-0123456789 \
    python manage.py collectstatic --noinput --verbosity 0 \
    && rm -rf /tmp/var
USER 10001:10001
EXPOSE 8000
# The web process, as in the Procfile; the manifests run worker, beat and watcher from this image.
CMD ["gunicorn", "liqo_dash.wsgi", "-c", "deploy/gunicorn.conf.py", "--bind", "0.0.0.0:8000"]
