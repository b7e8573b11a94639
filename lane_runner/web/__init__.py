"""The web console (issue 45, docs/console.md): the boards, the runs and what they cost,
as pages that read without JavaScript, a JSON API beside them, and the few controls
the command line has. Starlette and uvicorn are the ``web`` extra: nothing here is
imported unless the console is asked for (``lane-runner web``, ``web_listen``)."""
