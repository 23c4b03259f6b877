"""What an instructor does after grading: class insights, LMS exports, late work, regrades, similarity."""
