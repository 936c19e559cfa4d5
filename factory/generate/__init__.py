"""Spec -> package files (render) -> validated package in place (build)."""
