import os, socket, sys, time
from kazoo.client import KazooClient
host, port = os.environ["ZLC_ZK_CONNECT"].split(":")
def four(w):
    s = socket.create_connection((host, int(port))); s.sendall(w.encode()); out=b""
    while True:
        b = s.recv(65536)
        if not b: break
        out += b
    s.close(); return out.decode()
out = sys.argv[1]
open(out+"/mntr-before.txt","w").write(four("mntr"))
cs = [KazooClient(hosts=os.environ["ZLC_ZK_CONNECT"]) for _ in range(4)]
for c in cs: c.start()
lock = "/zlc/run1/l0"
cs[0].ensure_path(lock)
nodes = [c.create(lock + "/_c_x-lock-", ephemeral=True, sequence=True) for c in cs]
# c1: child watch on the lock dir (herd); c2: exists watch on predecessor; c3: data watch on predecessor
cs[1].get_children(lock, watch=lambda e: None)
cs[2].exists(nodes[1], watch=lambda e: None)
cs[3].get(nodes[2], watch=lambda e: None)
# c3 also an exists watch on the lock dir (data watch on the dir)
cs[3].exists(lock, watch=lambda e: None)
# a watch outside the run
cs[0].ensure_path("/zlc/other/l0"); cs[0].get_children("/zlc/other/l0", watch=lambda e: None)
time.sleep(0.5)
for w in ["wchc","wchp","wchs","mntr","cons"]:
    open(out+"/"+w+".txt","w").write(four(w))
for i,c in enumerate(cs): print(i, hex(c.client_id[0]))
for c in cs: c.stop()
