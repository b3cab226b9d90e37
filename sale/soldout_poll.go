package sale

import (
	"context"
	"time"
)

// The poller of the sold-out answer (soldout.go): while a suspected SKU has purchases queued here,
// or waiting before their holds, it reads the stock and answers the purchases it cannot serve.

// startPolling runs the poller, or wakes it if it runs. Under so.mu.
func (so *soldOut) startPolling() {
	if so.polling {
		select {
		case so.wake <- struct{}{}:
		default:
		}
		return
	}
	so.polling = true
	go so.poll()
}

// poll reads the suspected SKUs that have purchases queued or waiting before their holds, until
// there are none.
func (so *soldOut) poll() {
	t := time.NewTicker(soldOutPoll)
	defer t.Stop()
	for {
		so.mu.Lock()
		var skus, keys []string
		for sku, w := range so.skus {
			if w.suspect && (len(w.queued) > 0 || len(w.unheld) > 0) {
				skus = append(skus, sku)
				keys = appendUnheldKeys(keys, w)
			}
		}
		if len(skus) == 0 {
			so.polling = false
			so.mu.Unlock()
			return
		}
		so.reads++
		read := so.reads
		so.mu.Unlock()

		stocks, inUse, err := so.read(skus, keys)
		if err == nil {
			short, unheld := so.shortOf(stocks, read)
			for sku, stock := range stocks { // told as read, before the look-up of the keys
				so.tell(sku, stock)
			}
			// The purchases waiting before their holds first: they wait a moment only
			// (unheldWait), the queued ones until they are sent away.
			so.answerUnheld(unheld, inUse)
			so.sendAway(short)
		} else {
			so.sendOnAfterFailedRead(skus, read)
		}
		select {
		case <-t.C:
		case <-so.wake:
		case <-so.stop:
			so.mu.Lock()
			so.polling = false
			so.mu.Unlock()
			return
		}
	}
}

// read reads the stocks of skus and, when keys are given and stocksThenKeys is set, looks the
// keys up after it in the same round trip (inUse; nil otherwise).
func (so *soldOut) read(skus, keys []string) (stocks map[string]int64, inUse map[string]bool, _ error) {
	ctx, cancel := context.WithTimeout(context.Background(), soldOutReadTimeout)
	defer cancel()
	if len(keys) > 0 && so.stocksThenKeys != nil {
		return so.stocksThenKeys(ctx, skus, keys)
	}
	stocks, err := so.stocks(ctx, skus)
	return stocks, nil, err
}

// shortOf takes out of the queues every purchase queued before the read numbered read began that
// asks for more than its SKU's stock in that read, for sendAway, and answers the purchases
// waiting before their holds (unheldOf), returning those it found short, for answerUnheld.
func (so *soldOut) shortOf(stocks map[string]int64, read uint64) (short []*queuedPurchase, unheld []*unheldPurchase) {
	so.mu.Lock()
	defer so.mu.Unlock()
	for sku, stock := range stocks {
		w := so.skus[sku]
		if w == nil {
			continue
		}
		for q := range w.queued {
			// A purchase queued after the read began learns nothing from it.
			if q.seenBy < read && q.qty > stock {
				short = append(short, q)
				delete(w.queued, q)
			}
		}
		unheld = append(unheld, unheldOf(w, stock, read)...)
		// With units left, the purchases still queued can be served: their turns decide, and a
		// sale that empties the SKU makes it suspected again.
		w.suspect = stock == 0
		if !w.suspect {
			sendOnUnheld(w) // no read will be made for those that came during this one
		}
		so.forget(sku, w)
	}
	return short, unheld
}

// sendAway ends the wait of purchases a read found short, after one look-up of their keys: those
// whose key holds no order (or who have none a client used) leave with errSoldOutKeyFree, the
// others (and all, when the look-up fails) with errSoldOutWhileQueued, to be looked up each.
func (so *soldOut) sendAway(short []*queuedPurchase) {
	var keys []string
	for _, q := range short {
		if q.key != "" {
			keys = append(keys, q.key)
		}
	}
	taken, lookedUp := lookUpKeys(so.keys, keys)
	for _, q := range short {
		if q.key == "" || (lookedUp && !taken[q.key]) {
			q.leave(errSoldOutKeyFree)
		} else {
			q.leave(errSoldOutWhileQueued)
		}
	}
}

// lookUpKeys asks lookUp which of keys are taken, within soldOutReadTimeout; lookedUp is false
// when it failed, or there is no lookUp for keys to ask of. No keys are looked up at once.
func lookUpKeys(lookUp func(context.Context, []string) (map[string]bool, error), keys []string) (taken map[string]bool, lookedUp bool) {
	if len(keys) == 0 {
		return nil, true
	}
	if lookUp == nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), soldOutReadTimeout)
	defer cancel()
	taken, err := lookUp(ctx, keys)
	return taken, err == nil
}
