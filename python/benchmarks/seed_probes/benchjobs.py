import lakeshore as dls

@dls.udf(queue="seedbench")
def noop(i):
    return i
