package plot_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/veerhq/veer/sim"
	"github.com/veerhq/veer/sim/plot"
)

func TestWrite(t *testing.T) {
	sc, err := sim.LoadBundled("fig4")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), sc, sim.Strategies(), sim.Options{Sessions: 100})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "charts")
	files, err := plot.Write(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * (len(plot.Charts) + len(plot.CarrierCharts)); len(files) != want {
		t.Fatalf("%d files, want %d", len(files), want)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(f) {
		case ".png":
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
				t.Errorf("%s: %v", f, b)
			}
		case ".svg":
			if !bytes.Contains(data, []byte("<svg")) || !bytes.Contains(data, []byte("fig4")) {
				t.Errorf("%s: not an SVG chart of fig4", f)
			}
		default:
			t.Errorf("unexpected file %s", f)
		}
	}
}
