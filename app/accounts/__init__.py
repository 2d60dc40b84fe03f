"""Accounts, API keys and sessions: the store and the service functions.

The operator commands that drive them are the web app's (``app.commands.accounts``).
"""
