"""The operator's web console: a read-only view of the cluster served by a proxy on
``webui_port`` (docs/console.md), as Milvus 2.5's WebUI is.

``face.py`` starts it beside the proxy's other faces; ``server.py`` serves the pages (plain
HTML, JS and CSS from ``static/``, no build step, no CDN) and a JSON API under ``/api/``,
behind the proxy's users and TLS; ``views.py`` makes each page's data from the proxy's
read-only actions, run as the logged-in user; ``samples.py`` keeps a few minutes of the
process's own metrics for the charts.
"""
