\* SPDX-License-Identifier: Apache-2.0
------------------------------ MODULE StoreLease ------------------------------
(***************************************************************************)
(* A holder's lease on a coordination store with a TTL (etcd's lease kept *)
(* alive, ZooKeeper's session) under bounded clock drift: at most one      *)
(* holder believes it holds a valid lease at any real time               *)
(* (LeaseExclusive). This is what a store-backed conclaved computes        *)
(* (node/src/store_backend.cpp, docs/design.md "The lease on a store").    *)
(*                                                                         *)
(* Time. Real time `now` advances in integer ticks (Tick, at most         *)
(* MaxTime); in one tick each holder's clock and the store's clock advance *)
(* by an integer in Lo..Hi units (rho = (Hi - Lo) / (Hi + Lo)), as in      *)
(* Lease.tla. Every other step takes no real time.                        *)
(*                                                                         *)
(* The store. A request (a campaign or a renewal) reaches the store any    *)
(* number of ticks after it was sent, or never. If the key is free the     *)
(* request takes it (a new token: the store's counter grows); if the      *)
(* sender holds it, its expiry moves to the store's clock + TTL; else the  *)
(* request is refused. The store frees the key once its clock has reached  *)
(* the expiry (StoreExpire; possibly later, never earlier). The answer     *)
(* reaches the holder later too, or never.                                 *)
(*                                                                         *)
(* The holder. It stamps each request with its clock at the SEND, and on a *)
(* confirming answer holds until send + LeaseLen on its clock, with        *)
(* LeaseLen = (TTL * Lo) \div Hi, the integer form of TTL (1-rho)/(1+rho). *)
(* Sent at real t0, received by the store at t1 >= t0, the key is freed at *)
(* some t2 with Hi (t2 - t1) >= TTL; the holder's clock reads at least     *)
(* send + Lo (t - t0) at t, so it holds only while Lo (t - t0) < LeaseLen, *)
(* i.e. t - t0 < TTL / Hi <= t2 - t0. A refused answer ends its lease.    *)
(*                                                                         *)
(* PlantedBug = "NoFlight": the lease counts from the answer's RECEIPT     *)
(* (receipt + LeaseLen), not shortened by the renewal's time in flight:    *)
(* TLC must break LeaseExclusive.                                          *)
(***************************************************************************)
EXTENDS Integers, FiniteSets, TLC

CONSTANTS
    Holder,     \* the holders (model values)
    None,       \* no holder (a model value)
    Lo, Hi,     \* a clock advances Lo..Hi units per real tick
    TTL,        \* the store's lease, in its clock units
    MaxTime,    \* real ticks
    MaxTokens,  \* keys granted in all (bounds the store's counter)
    PlantedBug  \* "None" or "NoFlight"

ASSUME 0 < Lo /\ Lo <= Hi /\ TTL > 0 /\ None \notin Holder

NoTime == -1
LeaseLen == (TTL * Lo) \div Hi

VARIABLES
    now,       \* real time, in ticks
    clock,     \* clock[h]: holder h's monotonic clock
    sclock,    \* the store's clock
    owner,     \* the key's holder at the store, or None
    expiry,    \* the store's clock value at which the owner's lease ends
    counter,   \* the store's revision counter: tokens granted so far
    token,     \* token[h]: the token h believes it holds (0: none)
    leaseEnd,  \* leaseEnd[h]: h's lease end on its clock (NoTime: none)
    requests,  \* requests in flight to the store: [from, sent]
    answers    \* answers in flight: [to, sent, ok, tok]

vars == <<now, clock, sclock, owner, expiry, counter, token, leaseEnd, requests, answers>>

Valid(h) == token[h] # 0 /\ clock[h] < leaseEnd[h]

TypeOK ==
    /\ now \in 0..MaxTime
    /\ clock \in [Holder -> Nat]
    /\ sclock \in Nat
    /\ owner \in Holder \cup {None}
    /\ counter \in 0..MaxTokens
    /\ token \in [Holder -> 0..MaxTokens]
    /\ leaseEnd \in [Holder -> Int]

\* The property: never two holders acting on a valid lease at the same real time.
LeaseExclusive == \A h1, h2 \in Holder : h1 # h2 => ~(Valid(h1) /\ Valid(h2))

\* A valid holder's token is the store's latest: a fencing gate that saw it refuses older ones.
ValidTokenIsLatest == \A h \in Holder : Valid(h) => token[h] = counter

Init ==
    /\ now = 0
    /\ clock = [h \in Holder |-> 0]
    /\ sclock = 0
    /\ owner = None
    /\ expiry = 0
    /\ counter = 0
    /\ token = [h \in Holder |-> 0]
    /\ leaseEnd = [h \in Holder |-> NoTime]
    /\ requests = {}
    /\ answers = {}

Tick ==
    /\ now < MaxTime
    /\ now' = now + 1
    /\ \E d \in [Holder -> Lo..Hi] : clock' = [h \in Holder |-> clock[h] + d[h]]
    /\ \E ds \in Lo..Hi : sclock' = sclock + ds
    /\ UNCHANGED <<owner, expiry, counter, token, leaseEnd, requests, answers>>

\* A campaign or a keepalive, stamped with the send time (one in flight per holder).
Send(h) ==
    /\ ~\E r \in requests : r.from = h
    /\ ~\E a \in answers : a.to = h
    /\ requests' = requests \cup {[from |-> h, sent |-> clock[h]]}
    /\ UNCHANGED <<now, clock, sclock, owner, expiry, counter, token, leaseEnd, answers>>

StoreReceive(r) ==
    /\ requests' = requests \ {r}
    /\ IF owner = None /\ counter < MaxTokens
         THEN /\ owner' = r.from
              /\ expiry' = sclock + TTL
              /\ counter' = counter + 1
              /\ answers' = answers \cup {[to |-> r.from, sent |-> r.sent, ok |-> TRUE,
                                           tok |-> counter + 1]}
         ELSE IF owner = r.from
         THEN /\ expiry' = sclock + TTL
              /\ answers' = answers \cup {[to |-> r.from, sent |-> r.sent, ok |-> TRUE,
                                           tok |-> counter]}
              /\ UNCHANGED <<owner, counter>>
         ELSE /\ answers' = answers \cup {[to |-> r.from, sent |-> r.sent, ok |-> FALSE,
                                           tok |-> 0]}
              /\ UNCHANGED <<owner, expiry, counter>>
    /\ UNCHANGED <<now, clock, sclock, token, leaseEnd>>

StoreExpire ==
    /\ owner # None
    /\ sclock >= expiry
    /\ owner' = None
    /\ UNCHANGED <<now, clock, sclock, expiry, counter, token, leaseEnd, requests, answers>>

HolderReceive(a) ==
    /\ answers' = answers \ {a}
    /\ IF a.ok
         THEN /\ token' = [token EXCEPT ![a.to] = a.tok]
              /\ leaseEnd' = [leaseEnd EXCEPT ![a.to] =
                                IF PlantedBug = "NoFlight" THEN clock[a.to] + LeaseLen
                                                           ELSE a.sent + LeaseLen]
         ELSE /\ token' = [token EXCEPT ![a.to] = 0]
              /\ leaseEnd' = [leaseEnd EXCEPT ![a.to] = NoTime]
    /\ UNCHANGED <<now, clock, sclock, owner, expiry, counter, requests>>

\* A request or an answer lost (a connection cut, a store down).
Lose ==
    \/ \E r \in requests : requests' = requests \ {r} /\ UNCHANGED answers
    \/ \E a \in answers : answers' = answers \ {a} /\ UNCHANGED requests

LoseStep == Lose /\ UNCHANGED <<now, clock, sclock, owner, expiry, counter, token, leaseEnd>>

\* One name per action for TLC's per-action coverage (an existential over a variable set inside
\* Next would be counted as Next).
StoreReceiveAny == \E r \in requests : StoreReceive(r)
HolderReceiveAny == \E a \in answers : HolderReceive(a)

Next ==
    \/ Tick
    \/ \E h \in Holder : Send(h)
    \/ StoreReceiveAny
    \/ StoreExpire
    \/ HolderReceiveAny
    \/ LoseStep

Spec == Init /\ [][Next]_vars

\* Holders are interchangeable.
Symmetry == Permutations(Holder)

\* Canaries: the model reaches a valid lease, and a second holder's after the first's.
CanaryNoLease == \A h \in Holder : ~Valid(h)
CanaryNoSecondHolder == ~(counter >= 2 /\ \E h \in Holder : Valid(h) /\ token[h] = 2)
=============================================================================
