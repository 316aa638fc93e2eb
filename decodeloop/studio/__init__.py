"""The live studio: one conversation driven from a browser a step at a time (`decodeloop studio`).

session.py owns the conversation (a harness's `Turn`, its steps taken one at a time, the events kept for the
page); server.py serves the page and the session on 127.0.0.1 behind a secret token; page/ holds the page's
markup, style and script as package data.
"""
