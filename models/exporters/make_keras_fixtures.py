#!/usr/bin/env python3
# Makes the issue-12 Keras fixtures: a tiny random-init Keras U-Net (the seed's segmentation
# model: channels-last 16x16x3 images, per-pixel logits over 3 classes) exported by tf2onnx's
# convert.from_keras (opset 15), three ways:
#   unet.onnx         the default export: tf2onnx's graph optimizers on (the NHWC<->NCHW
#                     Transposes around every Conv cancelled or folded into the weights)
#   unet_noopt.onnx   optimizers={}: the raw conversion, each Conv/MaxPool/Resize between two
#                     Transposes (NHWC -> NCHW -> NHWC), Identity nodes kept (59 nodes, not 29)
#   unet_nchw.onnx    inputs_as_nchw/outputs_as_nchw: image (N, 3, 16, 16) and logits
#                     (N, 3, 16, 16), default optimizers (the class axis is 1)
# Beside them it records what TensorFlow itself computes, so tests need no TensorFlow:
#   unet_data.npz     "image" (N, 16, 16, 3) float32, channels-last as Keras takes it, and
#                     "label" (N, 16, 16) int64, each pixel's brightest channel (a real, if easy,
#                     segmentation); unet_nchw.onnx takes image.transpose(0, 3, 1, 2)
#   unet_ref.npz      "output": the eval logits (N, 16, 16, 3) for that input; "losses": the loss
#                     before each of 5 full-batch SGD steps (tf.keras.optimizers.SGD, lr LR, no
#                     momentum), computed with tf.GradientTape
# The loss is the one `dtc-compile --loss softmax-cross-entropy` attaches: mean softmax cross
# entropy over all N*16*16 pixels (Keras' SparseCategoricalCrossentropy(from_logits=True)),
# class axis last for the channels-last exports (--class-axis -1), 1 for unet_nchw.onnx.
# Architecture (Conv2D 3x3 'same' + ReLU throughout):
#   16x16: Conv 3->4, Conv 4->4 (skip1) | MaxPool 2 | 8x8: Conv 4->8, Conv 8->8 (skip2) |
#   MaxPool 2 | 4x4: Conv 8->16, Conv 16->16 | Conv2DTranspose 16->8 (2x2, stride 2) |
#   Concatenate skip2 | 8x8: Conv 16->8, Conv 8->8 | UpSampling2D 2 (bilinear) | Concatenate
#   skip1 | 16x16: Conv 12->4, Conv 4->4 | Conv 1x1 4->3 (logits, no activation).
# No BatchNormalization and no dropout: training and eval forward passes are the same function.
# Kernels are glorot-uniform and biases normal(0, 0.1), each with its own seed (random biases,
# not Keras' zeros, so that tf2onnx's optimizer, which merges equal constants, does not merge
# the zero biases of equal shape into one tied parameter). tf2onnx writes every constant as an
# initializer, among them Resize's float "scales" (and an empty "roi"), which a training compile
# must not train: the tests pass --freeze '^scales__' (see tests/e2e/exporter_parity.py).
#
# Run once, in a virtual environment outside the repository (CI does not install TensorFlow;
# tf2onnx 1.16 does not convert Keras 3 models, hence TensorFlow 2.15 with its Keras 2):
#     /usr/bin/python3.11 -m venv /work/venv-tf
#     /work/venv-tf/bin/pip install 'tensorflow-cpu==2.15.1' 'tf2onnx==1.16.1' 'onnx==1.16.2' \
#         'numpy<2' onnxruntime
#     /work/venv-tf/bin/python models/exporters/make_keras_fixtures.py [--out DIR]
# It checks each export with onnxruntime against the TensorFlow output and prints the error.
# Made with tensorflow-cpu 2.15.1 (Keras 2.15.0), tf2onnx 1.16.1, onnx 1.16.2, numpy 1.26.4.
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 4
SIZE = 16
CLASSES = 3
STEPS = 5
LR = 0.1
OPSET = 15
# Keras' UpSampling2D "nearest" exports Resize with coordinate_transformation_mode
# "tf_half_pixel_for_nn" (an opset-11 mode tf2onnx still writes at opset 15; dtc accepts it with
# a warning, tests/lit/ops/nn/resize-tf-half-pixel-for-nn.onnxtxt); the fixture uses "bilinear",
# which exports Resize linear half_pixel, as the seed U-Net's nn.Upsample does.
UPSAMPLING = "bilinear"


def unet():
    L = tf.keras.layers
    seed = iter(range(100, 200))

    def init():
        return dict(kernel_initializer=tf.keras.initializers.GlorotUniform(seed=next(seed)),
                    bias_initializer=tf.keras.initializers.RandomNormal(stddev=0.1,
                                                                        seed=next(seed)))

    def conv(x, ch, name, k=3, act="relu"):
        return L.Conv2D(ch, k, padding="same", activation=act, name=name, **init())(x)

    image = tf.keras.Input((SIZE, SIZE, 3), batch_size=BATCH, name="image")
    s1 = conv(conv(image, 4, "enc1a"), 4, "enc1b")
    x = L.MaxPool2D(2, name="pool1")(s1)
    s2 = conv(conv(x, 8, "enc2a"), 8, "enc2b")
    x = L.MaxPool2D(2, name="pool2")(s2)
    x = conv(conv(x, 16, "mida"), 16, "midb")
    x = L.Conv2DTranspose(8, 2, strides=2, name="up2", **init())(x)
    x = L.Concatenate(name="cat2")([x, s2])
    x = conv(conv(x, 8, "dec2a"), 8, "dec2b")
    x = L.UpSampling2D(2, interpolation=UPSAMPLING, name="up1")(x)
    x = L.Concatenate(name="cat1")([x, s1])
    x = conv(conv(x, 4, "dec1a"), 4, "dec1b")
    logits = conv(x, CLASSES, "logits", k=1, act=None)
    return tf.keras.Model(image, logits, name="unet")


def data():
    rng = np.random.default_rng(5)
    image = rng.standard_normal((BATCH, SIZE, SIZE, 3)).astype(np.float32)
    label = image.argmax(axis=-1).astype(np.int64)
    return image, label


def export(model, path, **kw):
    import onnx
    import tf2onnx
    spec = (tf.TensorSpec((BATCH, SIZE, SIZE, 3), tf.float32, name="image"),)
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=OPSET, **kw)
    proto.producer_version = tf2onnx.__version__  # no commit hash: re-runs give equal files
    for n in proto.graph.node:
        n.doc_string = ""
    onnx.checker.check_model(proto)
    onnx.save(proto, path)
    return proto


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import onnxruntime as ort
    import tf2onnx
    print("tensorflow", tf.__version__, "keras", __import__("keras").__version__, "tf2onnx",
          tf2onnx.__version__)
    tf.keras.utils.set_random_seed(0)
    model = unet()
    image, label = data()
    ref = model(image, training=False).numpy()

    paths = {}
    for suffix, kw in (("", {}), ("_noopt", {"optimizers": {}}),
                       ("_nchw", {"inputs_as_nchw": ["image"], "outputs_as_nchw": ["logits"]})):
        paths[suffix] = os.path.join(args.out, f"unet{suffix}.onnx")
        proto = export(model, paths[suffix], **kw)
        print(f"unet{suffix}.onnx", [n.name for n in proto.graph.input],
              [n.name for n in proto.graph.output], len(proto.graph.node), "nodes",
              sorted({n.op_type for n in proto.graph.node}))

    # 5 full-batch SGD steps; the loss is recorded before each update (what dtc-run logs).
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = tf.keras.optimizers.SGD(learning_rate=LR)
    losses = []
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(label, model(image, training=True))
        losses.append(float(loss.numpy()))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    np.savez(os.path.join(args.out, "unet_data.npz"), image=image, label=label)
    np.savez(os.path.join(args.out, "unet_ref.npz"), output=ref,
             losses=np.array(losses, dtype=np.float64))
    report = {"losses": losses}
    for suffix, path in paths.items():
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        x = image.transpose(0, 3, 1, 2) if suffix == "_nchw" else image
        got = sess.run(None, {"image": x})[0]
        if suffix == "_nchw":
            got = got.transpose(0, 2, 3, 1)
        report["ort_rel_err" + suffix] = float(np.abs(got - ref).max() / np.abs(ref).max())
    print("unet", json.dumps(report))


if __name__ == "__main__":
    main()
