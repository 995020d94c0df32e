"""Schedules for IOS graphs."""

from .stage import Stage

__all__ = ["Stage"]
