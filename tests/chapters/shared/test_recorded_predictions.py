"""Predict-then-measure readings (rev.chapters.shared.exercises.recorded_against): a recorded guess is read back
against the measurement, a missing one is said to be missing, never silently passed."""
from rev.chapters.shared.exercises import recorded_against


def test_numbers_say_by_how_much_they_missed_and_words_whether_they_matched():
    text = recorded_against({"spread": 0.05, "halves": "faster"}, {"spread": 0.25, "halves": "too noisy to tell"})
    assert "spread: you predicted 0.05, measured 0.25 (-80% of the measurement)" in text
    assert "halves: you predicted faster, measured too noisy to tell: not what you predicted." in text
    assert "as predicted" in recorded_against({"halves": "Too noisy to tell "}, {"halves": "too noisy to tell"})


def test_an_unrecorded_or_unmeasured_prediction_is_said_to_be_so():
    text = recorded_against({"spread": None, "halves": "slower"}, {"spread": 0.25, "halves": None})
    assert "spread: measured 0.25; no prediction recorded" in text
    assert "halves: not measured here" in text and "as predicted" not in text


def test_lists_match_whatever_their_kind():
    assert "as predicted" in recorded_against({"keeps": [1, 3]}, {"keeps": (1, 3)})
    assert "not what you predicted" in recorded_against({"keeps": []}, {"keeps": (1,)})


def test_tiny_numbers_keep_their_digits():
    assert "you predicted 1e-07, measured 0.00." in recorded_against({"defect": 1e-7}, {"defect": 0.0})


def test_a_prediction_written_as_words_against_a_number_is_compared_as_words():
    text = recorded_against({"speed ratio": "about half", "steps": "3"}, {"speed ratio": 0.48, "steps": 3})
    assert "speed ratio: you predicted about half, measured 0.48: not what you predicted." in text
    assert "steps: you predicted 3, measured 3: as predicted." in text
