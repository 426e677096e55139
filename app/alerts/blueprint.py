"""The alerts blueprint, apart from its routes: the alert pages (routes.py) and the channel pages
(channels.py) both register on it, and neither has to import the other to get it."""

from flask import Blueprint

bp = Blueprint("alerts", __name__, url_prefix="/alerts")
