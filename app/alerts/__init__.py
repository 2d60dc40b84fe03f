"""Alerts (issue 51): a key holder's lines on the board, and the signed calls made when one is
crossed. ``targets`` checks where a call may go; the tables are ``app.alerts.models``."""
