/* A placement: which layers (attention, norms, residual; optionally their
 * dense FFN) and whether the output head run on a device, with the device's
 * copies of their weights. Made once per model and device (setup), read by
 * every context made with it (hc_ctx_params.place); the host weights stay,
 * so a context can always fall back to the CPU. */
#ifndef HC_PLACE_H
#define HC_PLACE_H

#include <stdint.h>
#include <stdio.h>
#include "backend.h"

typedef struct hc_place hc_place;

typedef struct {
    int n_layers;    /* the first n_layers layers' dense part on the device */
    int ffn;         /* their dense FFN on the device too (every neuron; no sparse FFN there) */
    int head;        /* the output norm and head on the device */
} hc_place_plan;

/* The device copies for plan on dev (named name in messages). A layer or the
 * head whose weights the device's kernels do not take stays on the CPU with
 * one line on log; NULL + err when the device runs out of memory. */
hc_place *hc_place_new(const hc_model *m, hc_backend *dev, const char *name, const hc_place_plan *plan, FILE *log,
                       char *err, size_t errlen);
void hc_place_free(hc_place *p);
/* Layers with their dense part on the device, those of them whose FFN is
 * there too; whether the head is there. */
int hc_place_layers(const hc_place *p);
int hc_place_ffn_layers(const hc_place *p);
int hc_place_head(const hc_place *p);

/* For forward.c: layers[n_layer] and the head (o = output, attn_norm(_b) =
 * output_norm(_b)) as the CPU reads them (forward.c) ... */
void hc_host_layers(const hc_model *m, hc_blayer *layers, hc_blayer *head);
/* ... and with p's device copies written over them: 1 when anything is on
 * the device. */
int hc_place_attach(const hc_place *p, hc_blayer *layers, hc_blayer *head, const char **dev_name);
hc_backend *hc_place_device(const hc_place *p);
/* on[n_layer]: layers whose K and V live on the device */
const uint8_t *hc_place_kv_layers(const hc_place *p);

#endif
