"""Read models of a running app: what ``runnel status``, ``runnel jobs`` and ``runnel dead``
show, and the dashboard too, computed from an app's services and declarations as plain
data. The views (the CLI's tables and JSON, the dashboard's page) only render them, so
each shows the same numbers and none of them imports another.
"""
