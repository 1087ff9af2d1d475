"""Objectives: functions of parameters and data that inference drivers optimise or sample."""
