"""What a serving process runs besides HTTP: the sequencer, its link, background work, publishing.

Above log/read/witness/monitor, below api/ and cli/; imports neither of them.
"""
