"""The site's Jinja templates and static assets, installed as ``builder.templates``."""
