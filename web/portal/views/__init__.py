"""Portal views, thin: parse, check access (``brand_view``), call one service, render. Errors
from services (``ApplicationError``) become a message on the page."""
