package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/limiter-dev/limiter/ratelimits"
)

// release serves POST /v1/release: it ends leases of concurrency limits.
// An Idempotency-Key makes it safe to retry, as for a spend; releasing is
// idempotent anyway (a lease released twice answers allowed false the
// second time), the key only keeps the first answer. Like a refund it
// limits nothing, so it sends no RateLimit headers.
func (h *handler) release(w http.ResponseWriter, r *http.Request) {
	h.leaseCall(w, r, "release", h.limiter.ReleaseOnce, h.limiter.Release)
}

// renew serves POST /v1/renew: it extends leases of concurrency limits.
func (h *handler) renew(w http.ResponseWriter, r *http.Request) {
	h.leaseCall(w, r, "renew", h.limiter.RenewOnce, h.limiter.Renew)
}

// leaseCall decodes a release or renew, decides it under its
// Idempotency-Key if it has one, and answers the batch decision.
func (h *handler) leaseCall(w http.ResponseWriter, r *http.Request, op string,
	once func(context.Context, string, []ratelimits.LeaseTransaction) (*ratelimits.BatchDecision, error),
	plain func(context.Context, []ratelimits.LeaseTransaction) (*ratelimits.BatchDecision, error),
) {
	key, e := h.idempotencyKey(r)
	var txns []ratelimits.LeaseTransaction
	if e == nil {
		txns, e = h.decodeLeases(r)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	var bd *ratelimits.BatchDecision
	var err error
	if key != "" {
		bd, err = once(r.Context(), key, txns)
	} else {
		bd, err = plain(r.Context(), txns)
	}
	if h.settle(w, r, op, bd, err) {
		h.writeBatch(w, bd)
	}
}

// leaseJSON is one lease as sent: a release or renew takes no cost and no
// mode.
type leaseJSON struct {
	Limit field[string] `json:"limit"`
	ID    field[string] `json:"id"`
	Lease field[string] `json:"lease"`
}

// leaseRequestJSON is either one lease or {"transactions": [...]}.
type leaseRequestJSON struct {
	leaseJSON
	Transactions list[leaseJSON] `json:"transactions"`
}

// leaseNames is the top level of leaseRequestJSON, read for its names.
type leaseNames struct {
	Limit        anyValue `json:"limit"`
	ID           anyValue `json:"id"`
	Lease        anyValue `json:"lease"`
	Transactions anyValue `json:"transactions"`
}

// decodeLeases reads a release or renew body strictly, as
// decodeTransactions reads a spend's: nothing is decided until the whole
// body is read and valid.
func (h *handler) decodeLeases(r *http.Request) ([]ratelimits.LeaseTransaction, *apiError) {
	if e := checkContentType(r); e != nil {
		return nil, e
	}
	bufp := h.bufs.Get().(*[]byte)
	body, e := readBody(r, h.maxBody, (*bufp)[:0])
	defer h.putBuffer(bufp, body)
	if e != nil {
		return nil, e
	}
	return decodeLeaseBody(body, h.maxBatch)
}

// decodeLeaseBody decodes a release or renew body already read whole.
func decodeLeaseBody(body []byte, maxBatch int) ([]ratelimits.LeaseTransaction, *apiError) {
	var req leaseRequestJSON
	req.Transactions.max = maxBatch
	if f := decodeObject(body, &req); f != nil {
		return nil, f.leaseFault(body, maxBatch)
	}
	if !req.Transactions.set {
		txn, e := req.leaseJSON.lease(0)
		if e != nil {
			return nil, e
		}
		return []ratelimits.LeaseTransaction{txn}, nil
	}
	if e := checkLeaseBatch(&req, maxBatch); e != nil {
		return nil, e
	}
	txns := make([]ratelimits.LeaseTransaction, len(req.Transactions.v))
	for i := range req.Transactions.v {
		txn, e := req.Transactions.v[i].v.lease(i)
		if e != nil {
			return nil, e
		}
		txns[i] = txn
	}
	return txns, nil
}

// checkLeaseBatch refuses what is wrong with a batch of leases as a whole.
func checkLeaseBatch(req *leaseRequestJSON, maxBatch int) *apiError {
	if req.Limit.set || req.ID.set || req.Lease.set {
		return badRequest(codeInvalidRequest, `send either one lease or {"transactions": [...]}, not both`, -1)
	}
	n := req.Transactions.n
	if n == 0 {
		return badRequest(codeEmptyBatch, "transactions is empty: send at least one", -1)
	}
	if maxBatch > 0 && n > maxBatch {
		return badRequest(codeBatchTooLarge, strconv.Itoa(n)+" transactions in one batch; at most "+strconv.Itoa(maxBatch)+" are allowed", -1)
	}
	return nil
}

// lease checks that every field is there. Whether the lease is one the
// service could have made is the Limiter's to say (invalid_lease).
func (lj *leaseJSON) lease(index int) (ratelimits.LeaseTransaction, *apiError) {
	for _, f := range []struct {
		set  bool
		name string
	}{{lj.Limit.set, "limit"}, {lj.ID.set, "id"}, {lj.Lease.set, "lease"}} {
		if !f.set {
			return ratelimits.LeaseTransaction{}, badRequest(codeInvalidRequest, `"`+f.name+`" is required`, index)
		}
	}
	return ratelimits.LeaseTransaction{Limit: lj.Limit.v, ID: lj.ID.v, Lease: lj.Lease.v}, nil
}

// leaseFault words a fault of a release or renew body as transactionFault
// words a spend's: the body's shape first, then its names and nulls, then
// the batch as a whole, then the transaction at fault.
func (f *fault) leaseFault(body []byte, maxBatch int) *apiError {
	if e, top := f.topLevelFault(body, new(leaseNames)); top {
		return e
	}
	var top struct {
		leaseJSON
		Transactions list[jsontext.Value] `json:"transactions"`
	}
	if err := json.Unmarshal(body, &top, strict); err == nil {
		req := leaseRequestJSON{leaseJSON: top.leaseJSON}
		req.Transactions.n = top.Transactions.n
		if e := checkLeaseBatch(&req, maxBatch); e != nil {
			return e
		}
	} else if g := newFault(body, err); g.depth() <= 1 {
		return g.leaseFault(body, maxBatch)
	}
	i, err := strconv.Atoi(f.where[1])
	if err != nil {
		return f.shape(-1)
	}
	if f.depth() == 2 {
		return badRequest(codeInvalidRequest, "a transaction must be an object, got "+kindName(f.kind), i)
	}
	return f.fieldFault(i)
}
