"""The board as the web workers hold and serve it: snapshots, staleness and rendering."""
