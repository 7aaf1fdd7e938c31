package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/control/console"
	"github.com/veerhq/veer/dnsserver/dnsstore"
	"github.com/veerhq/veer/obs"
)

func init() { subcommands = append(subcommands, newControlCmd) }

func newControlCmd() *cobra.Command {
	var cfgFile string
	cmd := &cobra.Command{
		Use:   "control",
		Short: "Run the control plane (routing distribution, scheduling, admin API), or talk to it",
		Long: `control with no subcommand runs the control plane: the routing distribution
service (POST /v1/route) and the scheduling API (POST /v1/schedule) over
HTTP/1.1, HTTP/2 and HTTP/3, and the admin API. Zero config works: an
embedded store in ./veer-data, an admin token generated there on first start
(mode 0600; its path is printed). docs/control.md has the config file.

The other subcommands are a CLI over the admin API. With --config they read
the service's config file: the admin API at its admin_listen, the token in
its admin_token_file (default data_dir/admin.token); --server, --token-file
or VEER_TOKEN override them. Without --config: the zero config's
http://127.0.0.1:7444 and veer-data/admin.token.`,
		Example: `  veer control
  veer control --config control.yaml
  veer control put routing/table table.yaml --reason "new site b"
  veer control --config control.yaml history routing/table
  veer control put routing/table table.yaml --dry-run --sample 100000
  veer control playbook site_down --site a --reason "dc a fire"
  veer control history routing/table
  veer control rollback routing/table 3 --reason "bad change"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg control.Config
			if cfgFile != "" {
				if err := config.Load(cfgFile, &cfg); err != nil {
					return err
				}
			}
			return serveControl(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	cmd.PersistentFlags().StringVar(&cfgFile, "config", "", "the service's config file (YAML or JSON); none: zero config. Client subcommands read admin_listen, data_dir and admin_token_file from it")
	cl := &adminClient{config: &cfgFile}
	cmd.PersistentFlags().StringVar(&cl.server, "server", "", "admin API address (client subcommands); default http://ADMIN_LISTEN of --config, else http://"+control.DefaultAdminListen)
	cmd.PersistentFlags().StringVar(&cl.tokenFile, "token-file", "", "file holding the API token (or set VEER_TOKEN); default the admin token file of --config, else "+filepath.Join(control.DefaultDataDir, "admin.token"))
	cmd.AddCommand(controlClientCmds(cl)...)
	cmd.AddCommand(rolloutCmd(cl))
	return cmd
}

func serveControl(ctx context.Context, out io.Writer, cfg control.Config) error {
	log, err := obs.NewLogger(os.Stderr, "text", "info")
	if err != nil {
		return err
	}
	con, err := console.New(console.Config{}, console.Options{Logger: log})
	if err != nil {
		return err
	}
	svc, err := control.New(cfg, control.Options{Logger: log, Registerer: obs.NewRegistry(),
		Documents: map[string]func([]byte) error{dnsstore.KeyZones: dnsstore.ValidateZones}, UI: con.Mount})
	if err != nil {
		return err
	}
	addrs, done := svc.Run(ctx)
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	default:
	}
	path, created := svc.AdminTokenFile()
	note := ""
	if created {
		note = " (created now)"
	}
	fmt.Fprintf(out, "veer control: public API https://%s (HTTP/1.1, HTTP/2, HTTP/3)", addrs.Public)
	if addrs.Plain != "" {
		fmt.Fprintf(out, ", plain http://%s", addrs.Plain)
	}
	fmt.Fprintf(out, "\nveer control: admin API http://%s; admin token in %s%s\n", addrs.Admin, path, note)
	fmt.Fprintf(out, "veer control: web console http://%s/ui/\n", addrs.Admin)
	fmt.Fprintf(out, "veer control: answers signed with Ed25519 public key %s\n", control.PublicKeyString(svc.PublicKey()))
	return <-done
}

// adminClient calls the admin API.
type adminClient struct {
	config            *string // --config: the service's config file
	server, tokenFile string  // flags; "" = from the config
}

// target is the admin API's URL and the token file: the flags, else the
// service's config file (--config), else the zero config's.
func (c *adminClient) target() (server, tokenFile string, err error) {
	var cfg control.Config
	if *c.config != "" {
		if err := config.Load(*c.config, &cfg); err != nil {
			return "", "", err
		}
	}
	return cmp.Or(c.server, cfg.AdminURL()), cmp.Or(c.tokenFile, cfg.TokenFile()), nil
}

func token(tokenFile string) (string, error) {
	if t := os.Getenv("VEER_TOKEN"); t != "" {
		return t, nil
	}
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("no token: set VEER_TOKEN, --token-file or --config (%w)", err)
	}
	return strings.TrimSpace(string(raw)), nil
}

// do sends one request and prints the answer; a non-2xx status is an error.
func (c *adminClient) do(cmd *cobra.Command, method, path string, body []byte, hdr map[string]string) error {
	server, tokenFile, err := c.target()
	if err != nil {
		return err
	}
	tok, err := token(tokenFile)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(cmd.Context(), method, strings.TrimRight(server, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range hdr {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if v := resp.Header.Get("ETag"); v != "" && method == http.MethodGet {
		fmt.Fprintf(cmd.ErrOrStderr(), "version %s\n", strings.Trim(v, `"`))
	}
	_, err = cmd.OutOrStdout().Write(data)
	return err
}
