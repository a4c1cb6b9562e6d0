"""Serving a class: ``deploy/serve.py`` (replicas behind nginx), the Dockerfile and the cluster manifests."""
