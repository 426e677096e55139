"""WSGI entry point for gunicorn: `gunicorn --config gunicorn.conf.py wsgi:app`."""

from app import create_app
from config import refuse_insecure_start

app = create_app()
refuse_insecure_start(app.config)  # DEBUG=0 with the development SECRET_KEY: refuse to serve at all
