"""Paper A (Li, Wang, Liu, Chen, ICLR 2023): its token data (layout, data), its models (kinds,
models), their configs and premises (configs), the rules that know the data (oracle, floor) and the
family that ties them to vitsweep (family). Nothing is imported here: each module loads on its own."""
