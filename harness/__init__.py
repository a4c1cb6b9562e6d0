"""Shared test and benchmark plumbing: browser servers, legibility checks, bad-input cases."""
