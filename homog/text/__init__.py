"""Text foundations shared by the corpus and synth stages: sentences, the leading space,
the models' token counts."""
