"""The tasks extension (`io.modelcontextprotocol/tasks`): task runs, records and `tasks/*`.

One module per concept: `_runner` runs a tool call as a durable task, `_records` keeps task
records in the Store, `_methods` answers `tasks/get|update|cancel`, `_listen` serves
`subscriptions/listen` for task ids.
"""

from mrtr.server.tasks._records import TaskPolicy

__all__ = ["TaskPolicy"]
