"""Imported by the local engine's fork server only, before it forks any worker: the workers
then start with litellm and the scripted provider already loaded (one import, about 4 s
and 200 MB, for all of them instead of one each).  Nothing else imports this module."""

from .runner import warm

warm()
