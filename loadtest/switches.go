package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// SwitchConfig is a measure of the fleet's mode switches under load: buyers keep buying on every
// replica while the fleet's lock mode is switched Switches times, each through a replica drawn at
// random, going round Modes.
type SwitchConfig struct {
	Config                 // Targets, SKU, Concurrency, AdminToken, Timeout; Stock is reset once
	Switches int           // how many switches
	Pause    time.Duration // between one switch's answer and the next switch
	Seed     uint64
}

// SwitchReport is what the switches took, from the PUT's sending to its answer: the barrier's
// wait for the fleet's changes in flight, and the write.
type SwitchReport struct {
	Switches     []time.Duration `json:"-"`
	MedianMS     float64         `json:"median_ms"`
	P90MS        float64         `json:"p90_ms"`
	MaxMS        float64         `json:"max_ms"`
	Purchases    int64           `json:"purchases"`
	Refused      map[string]int  `json:"refused"` // purchases answered other than 201, by code
	Audit        Audit           `json:"audit"`
	FinalVersion int32           `json:"final_version"`
}

// MeasureSwitches runs the load and the switches, then checks the audit: a switch must never cost
// an update.
func MeasureSwitches(ctx context.Context, cfg SwitchConfig) (*SwitchReport, error) {
	if len(cfg.Targets) == 0 || len(cfg.Modes) < 2 || cfg.Switches < 1 || cfg.Concurrency < 1 {
		return nil, errors.New("loadtest: switches need targets, at least two modes, a number of switches and a concurrency")
	}
	a := newAPI(cfg.Config)
	defer a.close()
	if _, err := a.do(ctx, http.MethodPut, cfg.Targets[0]+"/admin/products/"+cfg.SKU, map[string]int{"stock": cfg.Stock}, nil, a.adminHeader()); err != nil {
		return nil, fmt.Errorf("reset %s: %w", cfg.SKU, err)
	}
	run, err := newRunID()
	if err != nil {
		return nil, err
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	rep := &SwitchReport{Refused: map[string]int{}}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		count atomic.Int64
	)
	for w := range cfg.Concurrency {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				s := purchase(loadCtx, a, cfg.Targets, w+i, purchaseBody([]string{cfg.SKU}, 1), fmt.Sprintf("sw-%s-%d-%d", run, w, i))
				if loadCtx.Err() != nil {
					return
				}
				count.Add(1)
				if s.status != http.StatusCreated {
					mu.Lock()
					rep.Refused[fmt.Sprintf("%d %s", s.status, s.code)]++
					mu.Unlock()
				}
			}
		})
	}
	// The fleet starts in Modes[0], so that every switch timed changes the mode.
	if _, err := a.do(ctx, http.MethodPut, cfg.Targets[0]+"/admin/lock-mode", map[string]string{"mode": cfg.Modes[0]}, nil, a.adminHeader()); err != nil {
		stopLoad()
		wg.Wait()
		return nil, fmt.Errorf("switch to %s first: %w", cfg.Modes[0], err)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 29))
	var switchErr error
	var lastVersion int32 = -1
	for i := range cfg.Switches {
		to := cfg.Modes[(i+1)%len(cfg.Modes)]
		target := cfg.Targets[rng.IntN(len(cfg.Targets))]
		var answer struct {
			Version int32 `json:"version"`
		}
		start := time.Now()
		_, err := a.do(ctx, http.MethodPut, target+"/admin/lock-mode", map[string]string{"mode": to}, &answer, a.adminHeader())
		took := time.Since(start)
		if err != nil {
			switchErr = fmt.Errorf("switch %d to %s through %s: %w", i+1, to, target, err)
			break
		}
		if answer.Version == lastVersion {
			switchErr = fmt.Errorf("switch %d to %s through %s changed nothing (version %d): the targets are not one fleet", i+1, to, target, answer.Version)
			break
		}
		lastVersion = answer.Version
		rep.Switches = append(rep.Switches, took)
		rep.FinalVersion = answer.Version
		select {
		case <-time.After(cfg.Pause):
		case <-ctx.Done():
		}
	}
	stopLoad()
	wg.Wait()
	rep.Purchases = count.Load()
	if switchErr != nil {
		return rep, switchErr
	}
	if rep.Audit, err = auditAny(ctx, a, cfg.Targets, cfg.SKU); err != nil {
		return rep, err
	}
	sorted := slices.Sorted(slices.Values(rep.Switches))
	at := func(q float64) float64 { return ms(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]) }
	rep.MedianMS, rep.P90MS, rep.MaxMS = at(0.5), at(0.9), ms(sorted[len(sorted)-1])
	if rep.Audit.Oversold != 0 || rep.Audit.LostUpdates != 0 {
		return rep, fmt.Errorf("loadtest: the switches cost updates: %+v", rep.Audit)
	}
	return rep, nil
}
