"""Duty cycles from PMPI traces: reading, analysis, reports and the profile workflow."""
