"""Evaluation harness: `kb bench financebench|docugami` over the production router and retrieval."""
