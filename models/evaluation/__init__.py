"""Evaluation maths (numpy) and evaluation stages."""
