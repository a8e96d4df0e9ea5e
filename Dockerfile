# Ridgeline API image: Python 3.11 slim, non-root, migrations and catalog data included.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RIDGELINE_DATA_DIR=/app/data

WORKDIR /app

# Dependencies first so source edits do not invalidate this layer.
COPY pyproject.toml README.md ./
COPY service/__init__.py service/py.typed service/
RUN pip install --upgrade pip && pip install .

COPY alembic.ini ./
COPY migrations/ migrations/
COPY hardware_catalog/ hardware_catalog/
COPY service/ service/
# Editable install: migrations/ and hardware_catalog/ are found beside the package.
RUN pip install --no-deps -e . \
    && useradd --create-home --uid 10001 ridgeline \
    && mkdir -p /app/data && chown ridgeline /app/data

USER ridgeline
EXPOSE 8000

HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=5 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2).status == 200 else 1)"

CMD ["ridgeline", "serve", "--host", "0.0.0.0", "--port", "8000"]
