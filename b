B
