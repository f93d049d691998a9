"""Middleware shipped with Runnel."""

from runnel.middleware.dead_letter import Dead, DeadLetterMiddleware

__all__ = ["Dead", "DeadLetterMiddleware"]
