"""Tools for rule authors: ``alertd check``, ``alertd test``, ``alertd replay`` and traffic recording.

All of them drive the same pure engine as the service, on a virtual clock and
without network (see :mod:`alertd.authoring.virtual`).
"""
