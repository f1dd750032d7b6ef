"""The estimator: what a sweep will cost before it runs (`vitsweep plan`, the ETA of `vitsweep
run`): pilot models trained and timed (pilot, timing), the worlds where runs stop as pilots saw
(worlds), each cell's search played out in them (rehearse) and the total (plan). No Ray."""
