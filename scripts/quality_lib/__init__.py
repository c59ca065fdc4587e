"""Quality evaluation harness for nlmdenoise (see docs/quality.md)."""
