package lockerotel_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	lockerotel "github.com/hashlock/locker/otel"
)

// Record a Client's metrics with OpenTelemetry: here into a manual reader; in a service, the
// MeterProvider of your exporter (or the global one, the default).
func Example() {
	reader := sdkmetric.NewManualReader()
	obs, err := lockerotel.NewObserver(
		lockerotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		lockerotel.WithKeyLabel(lockerotel.KeyPrefix(":")), // "invoice:42" is counted as "invoice"
	)
	if err != nil {
		panic(err)
	}
	client := locker.New(memory.New(), locker.WithObserver(obs))
	defer client.Close()

	ctx := context.Background()
	lease, err := client.Lock(ctx, "invoice:42")
	if err != nil {
		panic(err)
	}
	_ = lease.Unlock()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "locker.lock.wait.duration" {
			for _, p := range h.DataPoints {
				label, _ := p.Attributes.Value(lockerotel.LabelKey)
				outcome, _ := p.Attributes.Value(lockerotel.OutcomeKey)
				fmt.Println(m.Name, label.AsString(), outcome.AsString(), p.Count)
			}
		}
	}
	// Output: locker.lock.wait.duration invoice acquired 1
}
