"""Decisions that turn raw outputs into answers: scores, entity merging, answer spans."""
