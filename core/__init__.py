"""The ground floor: what every room shares and nothing of ours below it.

Errors and strict JSON, roles and permissions, the PRM800K format and the rating domain with
the workbench's rules and the aggregations, the background job with its views, the parameter
machinery, client addresses, locks and no-store. Modules here import Django, DRF and the
standard library only (core/tests/test_imports.py holds every room to its floor).
"""
