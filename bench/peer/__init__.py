"""The ledger benchmark's peer, django-hordak, run in a virtualenv of its own (``.venv-peer``) so
that neither hordak nor its dependencies enter the project's requirements or import contracts."""
