"""``mobagent dashboard``: the fleet, live in a browser (see docs/dashboard.md).

``state`` folds the bus's messages into what the page shows, ``feed`` paces what each
browser is sent, ``app`` is the web side (page, WebSocket, controls, token) and ``server``
runs the bus subscription and the web server together.
"""
