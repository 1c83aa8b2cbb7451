"""Small gold trees whose scores the tree tests work out by hand."""

# two PTB files: the cat sentence and a sentence with a trace (-NONE-), then a third sentence
T1_T2 = """\
( (S (NP-SBJ (DT The) (NN cat))
     (VP (VBD sat)
         (PP-LOC (IN on) (NP (DT the) (NN mat))))
     (. .)) )
(TOP (S (NP-SBJ-1 (PRP He)) (VP (VBD tried) (S (NP-SBJ (-NONE- *-1)) (VP (TO to) (VP (VB leave))))) (. .)))
"""
T3 = "(S (NP (NNP John)) (VP (VBZ runs)) (. .))\n"
# CoNLL-X: two sentences, the second with a multiword token line (1-2), which the reader skips
CONLLX = """\
# sent_id = s1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\tO
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_\tO
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_\tO
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\tO

1-2\tDogs'\t_\t_\t_\t_\t_\t_\t_\t_\tO
1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\tO
2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_\tO
"""
